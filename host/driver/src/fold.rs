//! Folding task outputs in partition order as they arrive.
//!
//! Outputs come back in any order. Each one starts a run of adjacent partitions; two runs
//! that touch are merged, left before right. So `merge` only has to be associative, and
//! the fold makes progress while stragglers still run.

use std::collections::BTreeMap;

#[derive(Debug)]
pub struct OrderedFold<T> {
    /// Runs of folded partitions: start → (end, value), `start..end`.
    runs: BTreeMap<u32, (u32, T)>,
}

impl<T> Default for OrderedFold<T> {
    fn default() -> Self {
        OrderedFold { runs: BTreeMap::new() }
    }
}

impl<T> OrderedFold<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds partition `index`'s output and merges whatever became adjacent.
    pub fn push<E>(
        &mut self,
        index: u32,
        value: T,
        merge: &mut impl FnMut(T, T) -> Result<T, E>,
    ) -> Result<(), E> {
        let (mut start, mut end, mut value) = (index, index + 1, value);
        if let Some((&left, &(left_end, _))) = self.runs.range(..start).next_back()
            && left_end == start
        {
            let (_, left_value) = self.runs.remove(&left).expect("found above");
            value = merge(left_value, value)?;
            start = left;
        }
        if let Some((right_end, right_value)) = self.runs.remove(&end) {
            value = merge(value, right_value)?;
            end = right_end;
        }
        self.runs.insert(start, (end, value));
        Ok(())
    }

    /// The folded value of partitions `0..count`, once all have arrived.
    pub fn into_total(mut self, count: u32) -> Option<T> {
        match self.runs.remove(&0) {
            Some((end, value)) if end == count && self.runs.is_empty() => Some(value),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn concat(a: Vec<u8>, b: Vec<u8>) -> Result<Vec<u8>, ()> {
        Ok([a, b].concat())
    }

    #[test]
    fn any_arrival_order_folds_in_partition_order() {
        for order in [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3], [1, 3, 0, 4, 2]] {
            let mut fold = OrderedFold::new();
            for i in order {
                fold.push(i, vec![b'a' + i as u8], &mut concat).unwrap();
            }
            assert_eq!(fold.into_total(5), Some(b"abcde".to_vec()), "order {order:?}");
        }
    }

    #[test]
    fn incomplete_fold_has_no_total() {
        let mut fold = OrderedFold::new();
        fold.push(0, b"a".to_vec(), &mut concat).unwrap();
        fold.push(2, b"c".to_vec(), &mut concat).unwrap();
        assert_eq!(fold.into_total(3), None);
    }

    #[test]
    fn merge_errors_stop_the_fold() {
        let mut fold = OrderedFold::new();
        fold.push(0, b"a".to_vec(), &mut concat).unwrap();
        let err = fold.push(1, b"b".to_vec(), &mut |_, _| Err("bad merge"));
        assert_eq!(err, Err("bad merge"));
    }
}
