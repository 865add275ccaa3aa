//! A program's functions by name: what [`functions!`](crate::functions) declares, and
//! what each declared function can be used as in a stage's task.
//!
//! Each function's uses are made where it is declared, from its own types: a function
//! of one value can map and map values, and flat-map when what it returns iterates; a
//! function of a borrowed value keys records, filters when it returns `bool` and orders
//! them for `take_ordered` when it returns something `Ord`; a function of two values of
//! one type folds them (`reduce_by_key`, `reduce`).

use super::records::{self, Rec};
use super::stage::Op;
use crate::Error;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;

/// Where a step's records go next.
pub(crate) type Out<'a> = &'a mut dyn FnMut(Rec) -> Result<(), Error>;

/// Makes a step's op from its capture.
type MakeOp = Box<dyn Fn(Vec<u8>) -> Box<dyn Op>>;

/// A declared function with what it can be used as.
#[doc(hidden)]
pub struct Entry {
    pub(crate) name: &'static str,
    pub(crate) map: Option<MakeOp>,
    pub(crate) flat_map: Option<MakeOp>,
    pub(crate) map_values: Option<MakeOp>,
    pub(crate) filter: Option<MakeOp>,
    pub(crate) key_by: Option<MakeOp>,
    pub(crate) top: Option<MakeOp>,
    pub(crate) fold: Option<MakeOp>,
    pub(crate) reducer: Option<Reducer>,
}

/// A fold of values of one type, erased: decoded from a shuffle's bytes, combined, and
/// encoded again.
#[derive(Clone)]
pub(crate) struct Reducer {
    pub decode: fn(&[u8]) -> Erased,
    pub combine: std::rc::Rc<Combine>,
    pub encode: fn(&dyn Any, &mut Vec<u8>) -> Result<(), Error>,
}

/// A value of a type only its function knows, or why it could not be made.
pub(crate) type Erased = Result<Box<dyn Any>, Error>;

/// Two values of a fold's type folded into one.
pub(crate) type Combine = dyn Fn(Box<dyn Any>, Box<dyn Any>) -> Erased;

/// The functions a component declares, by name.
#[doc(hidden)]
pub struct Registry(HashMap<&'static str, Entry>);

impl Registry {
    #[doc(hidden)]
    pub fn new(entries: impl IntoIterator<Item = Entry>) -> Registry {
        Registry(entries.into_iter().map(|e| (e.name, e)).collect())
    }

    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.0.keys().map(|n| n.to_string()).collect();
        names.sort();
        names
    }

    pub(crate) fn get(&self, name: &str) -> Result<&Entry, Error> {
        self.0.get(name).ok_or_else(|| {
            Error::fatal(format!(
                "the component declares no function {name:?} (it declares: {})",
                self.names().join(", ")
            ))
        })
    }

    pub(crate) fn reducer(&self, name: &str) -> Result<Reducer, Error> {
        let entry = self.get(name)?;
        entry.reducer.clone().ok_or_else(|| {
            Error::fatal(format!("the function {name} does not fold two values of one type into one"))
        })
    }
}

thread_local! {
    /// The capture of the step whose function runs now.
    static CAPTURE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The value the running step was given with [`Capture::with`], decoded.
///
/// # Panics
///
/// When the step was given no value of type `T`: a function that reads a capture must
/// be given one where the program uses it.
///
/// ```
/// flint_guest::functions! {
///     fn above(n: &u64) -> bool { *n > flint_guest::program::captured::<u64>() }
/// }
/// # fn main() {}
/// ```
pub fn captured<T: DeserializeOwned>() -> T {
    CAPTURE.with(|c| match records::decode(&c.borrow()) {
        Ok(value) => value,
        Err(e) => panic!("this step's function reads a value it was not given with .with(..): {}", e.message),
    })
}

fn with_capture<R>(capture: &[u8], f: impl FnOnce() -> R) -> R {
    if capture.is_empty() {
        return f();
    }
    let previous = CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), capture.to_vec()));
    let result = f();
    CAPTURE.with(|c| *c.borrow_mut() = previous);
    result
}

/// The name a plan gives a function: its path in the component (`my_job::words`), the
/// same in every instance of one build.
#[doc(hidden)]
pub fn name_of<F>(_: &F) -> &'static str {
    std::any::type_name::<F>()
}

/// A function declared with [`functions!`](crate::functions) as a step takes it: as
/// it is, or given a value with [`Capture::with`]. `M` tells the two apart.
pub trait Func<M> {
    /// The function.
    type F: Copy + 'static;
    #[doc(hidden)]
    fn function(&self) -> Self::F;
    #[doc(hidden)]
    fn capture(&self) -> &[u8];
    /// The name plans give it.
    fn name(&self) -> &'static str {
        std::any::type_name::<Self::F>()
    }
}

/// [`Func`]'s marker for a function as it is.
#[doc(hidden)]
pub struct Plain;
/// [`Func`]'s marker for a function given a value.
#[doc(hidden)]
pub struct Captured;

impl<F: Copy + 'static> Func<Plain> for F {
    type F = F;
    fn function(&self) -> F {
        *self
    }
    fn capture(&self) -> &[u8] {
        &[]
    }
}

/// A function with the value it was given (Spark's closure capture, as data): the
/// step sends the value with the function's name, and the function reads it with
/// [`captured`].
pub struct With<F> {
    f: F,
    capture: Vec<u8>,
}

impl<F: Copy + 'static> Func<Captured> for With<F> {
    type F = F;
    fn function(&self) -> F {
        self.f
    }
    fn capture(&self) -> &[u8] {
        &self.capture
    }
}

/// Gives a declared function a value to read while it runs.
///
/// ```
/// use flint_guest::program::{Capture, captured};
/// flint_guest::functions! {
///     fn above(n: &u64) -> bool { *n > captured::<u64>() }
/// }
/// fn main() {
///     let over_ten = above.with(&10u64).unwrap();
/// }
/// ```
pub trait Capture: Copy + 'static {
    /// The function with `value`, encoded as data.
    fn with<T: Serialize>(self, value: &T) -> Result<With<Self>, Error> {
        Ok(With { f: self, capture: records::encode(value)? })
    }
}

impl<F: Copy + 'static> Capture for F {}

/// A step op from a closure over each record.
struct Each<F>(F);

impl<F: FnMut(Rec, Out<'_>) -> Result<(), Error>> Op for Each<F> {
    fn push(&mut self, record: Rec, out: Out<'_>) -> Result<(), Error> {
        (self.0)(record, out)
    }
}

fn each(f: impl FnMut(Rec, Out<'_>) -> Result<(), Error> + 'static) -> Box<dyn Op> {
    Box::new(Each(f))
}

impl Entry {
    fn named(name: &'static str) -> Entry {
        Entry {
            name,
            map: None,
            flat_map: None,
            map_values: None,
            filter: None,
            key_by: None,
            top: None,
            fold: None,
            reducer: None,
        }
    }

    /// A function of one value.
    #[doc(hidden)]
    pub fn of_value<A, R>(name: &'static str, f: fn(A) -> R) -> Entry
    where
        A: DeserializeOwned + 'static,
        R: Serialize + DeserializeOwned + 'static,
    {
        let mut entry = Entry::named(name);
        entry.map = Some(Box::new(move |capture| {
            each(move |record, out| {
                let value = record.take::<A>()?;
                out(Rec::typed(with_capture(&capture, || f(value))))
            })
        }));
        entry.map_values = Some(Box::new(move |capture| {
            each(move |record, out| {
                let (mut bytes, split) = record.pair()?;
                let value: A = records::decode(&bytes[split..])?;
                bytes.truncate(split);
                records::encode_into(&with_capture(&capture, || f(value)), &mut bytes)?;
                out(Rec::Pair(bytes, split))
            })
        }));
        entry
    }

    /// A function of a borrowed value.
    #[doc(hidden)]
    pub fn of_ref<A, R>(name: &'static str, f: fn(&A) -> R) -> Entry
    where
        A: Serialize + DeserializeOwned + 'static,
        R: Serialize + 'static,
    {
        let mut entry = Entry::named(name);
        entry.key_by = Some(Box::new(move |capture| {
            each(move |record, out| {
                let value = record.take::<A>()?;
                let key = with_capture(&capture, || f(&value));
                out(Rec::typed((key, value)))
            })
        }));
        entry
    }

    /// A function folding two values of one type.
    #[doc(hidden)]
    pub fn of_two<A, B, R>(name: &'static str, _: fn(A, B) -> R) -> Entry {
        Entry::named(name)
    }

    #[doc(hidden)]
    pub fn and(mut self, uses: Uses) -> Entry {
        self.flat_map = self.flat_map.or(uses.flat_map);
        self.filter = self.filter.or(uses.filter);
        self.top = self.top.or(uses.top);
        self.fold = self.fold.or(uses.fold);
        self.reducer = self.reducer.or(uses.reducer);
        self
    }
}

/// The uses a function's types allow beyond its shape's own.
#[doc(hidden)]
#[derive(Default)]
pub struct Uses {
    flat_map: Option<MakeOp>,
    filter: Option<MakeOp>,
    top: Option<MakeOp>,
    fold: Option<MakeOp>,
    reducer: Option<Reducer>,
}

/// Asks a function's types what they allow, at the declaration (where its types are
/// known): each use is a trait implemented for the probe only when the types allow it,
/// with a fallback for every probe one reference further, which the method call
/// reaches only when the first does not apply.
#[doc(hidden)]
pub struct Probe<F>(pub F);

#[doc(hidden)]
pub trait FlatMap {
    fn flat_map_use(&self) -> Uses;
}
impl<A, I> FlatMap for Probe<fn(A) -> I>
where
    A: DeserializeOwned + 'static,
    I: IntoIterator + 'static,
    I::Item: Serialize + 'static,
{
    fn flat_map_use(&self) -> Uses {
        let f = self.0;
        Uses {
            flat_map: Some(Box::new(move |capture| {
                each(move |record, out| {
                    let value = record.take::<A>()?;
                    with_capture(&capture, || f(value)).into_iter().try_for_each(|item| out(Rec::typed(item)))
                })
            })),
            ..Uses::default()
        }
    }
}
#[doc(hidden)]
pub trait NoFlatMap {
    fn flat_map_use(&self) -> Uses {
        Uses::default()
    }
}
impl<F> NoFlatMap for &Probe<F> {}

#[doc(hidden)]
pub trait Filter {
    fn filter_use(&self) -> Uses;
}
impl<A> Filter for Probe<fn(&A) -> bool>
where
    A: Serialize + DeserializeOwned + 'static,
{
    fn filter_use(&self) -> Uses {
        let f = self.0;
        Uses {
            filter: Some(Box::new(move |capture| {
                each(move |record, out| {
                    let value = record.take::<A>()?;
                    match with_capture(&capture, || f(&value)) {
                        true => out(Rec::typed(value)),
                        false => Ok(()),
                    }
                })
            })),
            ..Uses::default()
        }
    }
}
#[doc(hidden)]
pub trait NoFilter {
    fn filter_use(&self) -> Uses {
        Uses::default()
    }
}
impl<F> NoFilter for &Probe<F> {}

#[doc(hidden)]
pub trait Top {
    fn top_use(&self) -> Uses;
}
impl<A, K> Top for Probe<fn(&A) -> K>
where
    A: Serialize + DeserializeOwned + 'static,
    K: Ord + 'static,
{
    fn top_use(&self) -> Uses {
        let f = self.0;
        Uses {
            top: Some(Box::new(move |capture| {
                let n: u64 = records::decode(&capture).unwrap_or(0);
                Box::new(TopOp::<A, K> {
                    f,
                    n: n as usize,
                    kept: std::collections::BinaryHeap::new(),
                    _a: PhantomData,
                })
            })),
            ..Uses::default()
        }
    }
}
#[doc(hidden)]
pub trait NoTop {
    fn top_use(&self) -> Uses {
        Uses::default()
    }
}
impl<F> NoTop for &Probe<F> {}

/// The `n` records of the least keys, by a max-heap of them.
struct TopOp<A, K> {
    f: fn(&A) -> K,
    n: usize,
    kept: std::collections::BinaryHeap<Ranked<K, A>>,
    _a: PhantomData<A>,
}

struct Ranked<K, A>(K, u64, A);

impl<K: Ord, A> PartialEq for Ranked<K, A> {
    fn eq(&self, other: &Self) -> bool {
        (&self.0, self.1) == (&other.0, other.1)
    }
}
impl<K: Ord, A> Eq for Ranked<K, A> {}
impl<K: Ord, A> PartialOrd for Ranked<K, A> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<K: Ord, A> Ord for Ranked<K, A> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.0, self.1).cmp(&(&other.0, other.1))
    }
}

impl<A, K> Op for TopOp<A, K>
where
    A: Serialize + DeserializeOwned + 'static,
    K: Ord + 'static,
{
    fn push(&mut self, record: Rec, _: Out<'_>) -> Result<(), Error> {
        if self.n == 0 {
            return Ok(());
        }
        let value = record.take::<A>()?;
        let key = (self.f)(&value);
        let seq = self.kept.len() as u64;
        if self.kept.len() < self.n {
            self.kept.push(Ranked(key, seq, value));
        } else if self.kept.peek().is_some_and(|top| key < top.0) {
            self.kept.pop();
            self.kept.push(Ranked(key, seq, value));
        }
        Ok(())
    }

    fn finish(&mut self, out: Out<'_>) -> Result<(), Error> {
        for Ranked(_, _, value) in std::mem::take(&mut self.kept).into_sorted_vec() {
            out(Rec::typed(value))?;
        }
        Ok(())
    }
}

#[doc(hidden)]
pub trait Fold {
    fn fold_use(&self) -> Uses;
}
impl<V> Fold for Probe<fn(V, V) -> V>
where
    V: Serialize + DeserializeOwned + 'static,
{
    fn fold_use(&self) -> Uses {
        let f = self.0;
        fn decode<V: DeserializeOwned + 'static>(bytes: &[u8]) -> Erased {
            Ok(Box::new(records::decode::<V>(bytes)?))
        }
        fn encode<V: Serialize + 'static>(value: &dyn Any, out: &mut Vec<u8>) -> Result<(), Error> {
            let value = value.downcast_ref::<V>().ok_or_else(|| Error::fatal("a fold of another type"))?;
            records::encode_into(value, out)
        }
        let combine = move |a: Box<dyn Any>, b: Box<dyn Any>| -> Erased {
            match (a.downcast::<V>(), b.downcast::<V>()) {
                (Ok(a), Ok(b)) => Ok(Box::new(f(*a, *b))),
                _ => Err(Error::fatal("a fold given values of another type")),
            }
        };
        Uses {
            fold: Some(Box::new(move |capture| Box::new(FoldOp { f, capture, acc: None }))),
            reducer: Some(Reducer {
                decode: decode::<V>,
                combine: std::rc::Rc::new(combine),
                encode: encode::<V>,
            }),
            ..Uses::default()
        }
    }
}
#[doc(hidden)]
pub trait NoFold {
    fn fold_use(&self) -> Uses {
        Uses::default()
    }
}
impl<F> NoFold for &Probe<F> {}

struct FoldOp<V> {
    f: fn(V, V) -> V,
    capture: Vec<u8>,
    acc: Option<V>,
}

impl<V: Serialize + DeserializeOwned + 'static> Op for FoldOp<V> {
    fn push(&mut self, record: Rec, _: Out<'_>) -> Result<(), Error> {
        let value = record.take::<V>()?;
        let f = self.f;
        self.acc = Some(match self.acc.take() {
            None => value,
            Some(acc) => with_capture(&self.capture, || f(acc, value)),
        });
        Ok(())
    }
    fn finish(&mut self, out: Out<'_>) -> Result<(), Error> {
        match self.acc.take() {
            Some(acc) => out(Rec::typed(acc)),
            None => Ok(()),
        }
    }
}
