//! Folding task outputs as they arrive: in partition order, or in any order for jobs
//! whose merge is commutative.
//!
//! Outputs come back in any order. Each one starts a run of adjacent partitions; two runs
//! that touch are merged, left before right. So `merge` only has to be associative, and
//! the fold makes progress while stragglers still run. A combining job (its component
//! exports `combiner`) promises a commutative merge as well: its partial results, each
//! holding any set of tasks, are merged into one total as they come.

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

/// A fold of either kind, with what it has taken in so far.
#[derive(Debug)]
pub enum Folding<T> {
    /// Partition order: values of single tasks, by index.
    Ordered(OrderedFold<T>),
    /// Any order: values of any number of tasks, merged into one total.
    Any { total: Option<T>, tasks: u64 },
}

/// Why a value could not be folded.
#[derive(Debug, PartialEq, Eq)]
pub enum FoldError<E> {
    /// The job's merge failed.
    Merge(E),
    /// It names no partition while the fold keeps partition order. The caller's checks
    /// keep this from happening; if it does, the job fails rather than finish without
    /// that value.
    Unplaceable,
}

impl<T> Folding<T> {
    pub fn new(commutative: bool) -> Self {
        if commutative {
            Folding::Any { total: None, tasks: 0 }
        } else {
            Folding::Ordered(OrderedFold::new())
        }
    }

    /// Adds the value of partition `index`, or of `tasks` tasks combined (no index).
    pub fn push<E>(
        &mut self,
        index: Option<u32>,
        tasks: u32,
        value: T,
        merge: &mut impl FnMut(T, T) -> Result<T, E>,
    ) -> Result<(), FoldError<E>> {
        match self {
            Folding::Ordered(fold) => match index {
                Some(index) if tasks == 1 => fold.push(index, value, merge).map_err(FoldError::Merge),
                _ => Err(FoldError::Unplaceable),
            },
            Folding::Any { total, tasks: count } => {
                *total = Some(match total.take() {
                    Some(left) => merge(left, value).map_err(FoldError::Merge)?,
                    None => value,
                });
                *count += u64::from(tasks);
                Ok(())
            }
        }
    }

    /// The folded value of all `count` tasks, once every one is in.
    pub fn into_total(self, count: u32) -> Option<T> {
        match self {
            Folding::Ordered(fold) => fold.into_total(count),
            Folding::Any { total, tasks } => total.filter(|_| tasks == u64::from(count)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(a: u64, b: u64) -> Result<u64, ()> {
        Ok(a + b)
    }

    #[test]
    fn commutative_fold_takes_partials_of_any_tasks() {
        let mut fold = Folding::new(true);
        fold.push(None, 3, 30, &mut add).unwrap();
        fold.push(Some(7), 1, 7, &mut add).unwrap();
        fold.push(None, 4, 40, &mut add).unwrap();
        assert_eq!(fold.into_total(8), Some(77));
    }

    #[test]
    fn commutative_fold_missing_tasks_has_no_total() {
        let mut fold = Folding::new(true);
        fold.push(None, 3, 30, &mut add).unwrap();
        assert_eq!(fold.into_total(4), None);
    }

    #[test]
    fn ordered_fold_refuses_a_partial() {
        let mut fold = Folding::new(false);
        assert_eq!(fold.push(None, 3, 30, &mut add), Err(FoldError::Unplaceable));
        assert_eq!(fold.push(Some(0), 2, 30, &mut add), Err(FoldError::Unplaceable));
    }

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
