//! Programs: a job written as datasets and actions over them, as a Spark program is.
//!
//! A program's [`Program::main`] runs on the driver, in a sandboxed instance of the
//! job's component. It makes [`Dataset`]s from sources ([`text_file`],
//! [`parallelize`], [`range`]), transforms them (narrow steps: `map`, `flat_map`,
//! `filter`, `key_by`, `map_values`; wide ones, through a shuffle: `reduce_by_key`,
//! `group_by_key`, `join`, `left_outer_join`, `cogroup`, `sort_by_key`, `distinct`,
//! `repartition`) and runs actions (`collect`, `count`, `take`, `take_ordered`,
//! `reduce`): each action is a job of stages, cut at every shuffle, whose tasks run on
//! executors in instances of the same component, the narrow steps of a stage one after
//! another inside one task.
//!
//! The functions a dataset applies are the component's own, declared with
//! [`functions!`](crate::functions) and named in the plan; what a function needs
//! besides its record goes with it as data ([`Capture::with`], read back with
//! [`captured`]), never as a closure. Records are serde types; across the host they
//! travel as bytes that sort as the values do (memcomparable), so a key's order is its
//! type's: `sort_by_key` sorts numbers as numbers and strings bytewise.
//!
//! ```
//! use flint_guest::program::{Dataset, Program, text_file};
//! use flint_guest::Error;
//!
//! flint_guest::functions! {
//!     fn words(line: String) -> Vec<String> {
//!         line.split_whitespace().map(str::to_owned).collect()
//!     }
//!     fn one(word: String) -> (String, u64) { (word, 1) }
//!     fn add(a: u64, b: u64) -> u64 { a + b }
//!     fn by_count(entry: &(String, u64)) -> (std::cmp::Reverse<u64>, String) {
//!         (std::cmp::Reverse(entry.1), entry.0.clone())
//!     }
//! }
//!
//! struct TopWords;
//! impl Program for TopWords {
//!     type Result = Vec<(String, u64)>;
//!     fn main() -> Result<Self::Result, Error> {
//!         let counts = text_file("*").flat_map(words).map(one).reduce_by_key(add, 0);
//!         counts.take_ordered(3, by_count)
//!     }
//! }
//! flint_guest::export_program!(TopWords, [words, one, add, by_count]);
//!
//! fn main() {
//!     use flint_guest::testing::{Input, Local};
//!     let top = Local::new().program::<TopWords>([Input::text("a b a\nc a b\n")]).unwrap();
//!     assert_eq!(top.result, serde_json::json!([["a", 3], ["b", 2], ["c", 1]]));
//! }
//! ```

pub(crate) mod functions;
pub(crate) mod records;
pub(crate) mod stage;

pub use functions::{Capture, Func, With, captured};

use crate::Error;
use records::Rec;
use serde::Serialize;
use serde::de::DeserializeOwned;
use stage::{Dep, Step};
use std::marker::PhantomData;

/// A job written as a program: `main` builds datasets and runs actions on them; what
/// it returns is the job's result, as JSON.
pub trait Program {
    /// The job's result.
    type Result: Serialize;
    /// The program, run once, on the driver.
    fn main() -> Result<Self::Result, Error>;
}

/// Where a dataset's records start, as the driver is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    TextFile(String),
    Parallelize { records: Vec<Vec<u8>>, slices: u32 },
    Range(u32),
}

/// A distributed collection of `T`s: a handle to the lineage the driver keeps.
/// Transformations return new datasets at once and run nothing; an action runs a job.
/// A transformation the driver refuses (a function the component does not declare, an
/// input the submission did not give) makes a dataset that fails its actions with
/// that reason.
pub struct Dataset<T> {
    id: Result<u32, Error>,
    _records: PhantomData<fn() -> T>,
}

impl<T> Clone for Dataset<T> {
    fn clone(&self) -> Self {
        Dataset { id: self.id.clone(), _records: PhantomData }
    }
}

impl<T> std::fmt::Debug for Dataset<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.id {
            Ok(id) => write!(f, "Dataset({id})"),
            Err(e) => write!(f, "Dataset(failed: {e})"),
        }
    }
}

fn dataset<T>(id: Result<u32, Error>) -> Dataset<T> {
    Dataset { id, _records: PhantomData }
}

/// The lines of the submission's inputs that `name` picks (one as the submission gave
/// it, one by its file name, or `"*"` for all of them), without their line endings;
/// bytes that are not UTF-8 read as U+FFFD. One partition a split of the input.
pub fn text_file(name: &str) -> Dataset<String> {
    dataset(driver::source(Source::TextFile(name.to_owned())))
}

/// The program's own values, cut into `slices` partitions in order (at least one).
pub fn parallelize<T: Serialize + 'static>(values: impl IntoIterator<Item = T>, slices: u32) -> Dataset<T> {
    let records = values.into_iter().map(|v| stage::tag(Rec::typed(v))).collect::<Result<Vec<_>, _>>();
    dataset(
        records.and_then(|records| driver::source(Source::Parallelize { records, slices: slices.max(1) })),
    )
}

/// `partitions` generated partitions, each one record: its index.
pub fn range(partitions: u32) -> Dataset<u32> {
    dataset(driver::source(Source::Range(partitions)))
}

impl<T: Serialize + DeserializeOwned + 'static> Dataset<T> {
    fn narrow<U>(&self, kind: &str, function: &str, capture: Vec<u8>) -> Dataset<U> {
        let step = Step { kind: kind.into(), function: function.into(), capture };
        dataset(self.id.clone().and_then(|parent| driver::narrow(parent, step)))
    }

    fn step<M, U>(&self, kind: &str, f: &impl Func<M>) -> Dataset<U> {
        self.narrow(kind, f.name(), f.capture().to_vec())
    }

    /// Each record through `f`.
    pub fn map<U, M, S: Func<M>>(&self, f: S) -> Dataset<U>
    where
        S::F: Fn(T) -> U,
    {
        self.step("map", &f)
    }

    /// Each record through `f`, every item of what it returns a record.
    pub fn flat_map<I: IntoIterator, M, S: Func<M>>(&self, f: S) -> Dataset<I::Item>
    where
        S::F: Fn(T) -> I,
    {
        self.step("flat-map", &f)
    }

    /// The records for which `f` is true.
    pub fn filter<M, S: Func<M>>(&self, f: S) -> Dataset<T>
    where
        S::F: Fn(&T) -> bool,
    {
        self.step("filter", &f)
    }

    /// Each record keyed by `f`: `(f(&record), record)`.
    pub fn key_by<K, M, S: Func<M>>(&self, f: S) -> Dataset<(K, T)>
    where
        S::F: Fn(&T) -> K,
    {
        self.step("key-by", &f)
    }

    /// The distinct records, through a shuffle into `partitions` partitions (0: as
    /// many as the dataset has).
    pub fn distinct(&self, partitions: u32) -> Dataset<T> {
        self.wide(&[], "distinct", "", Vec::new(), partitions)
    }

    /// The records moved evenly into `partitions` partitions (0: as many as the
    /// dataset has), through a shuffle.
    pub fn repartition(&self, partitions: u32) -> Dataset<T> {
        self.wide(&[], "repartition", "", Vec::new(), partitions)
    }

    fn wide<U>(
        &self,
        others: &[&Result<u32, Error>],
        kind: &str,
        function: &str,
        capture: Vec<u8>,
        partitions: u32,
    ) -> Dataset<U> {
        let dep = Dep { kind: kind.into(), function: function.into(), capture, partitions };
        let parents =
            std::iter::once(&self.id).chain(others.iter().copied()).cloned().collect::<Result<Vec<u32>, _>>();
        dataset(parents.and_then(|parents| driver::wide(&parents, dep)))
    }

    /// Every record, in partition order (Spark's `collect`), within the driver's
    /// `flint.driver.maxResultSize`.
    pub fn collect(&self) -> Result<Vec<T>, Error> {
        self.run(self)
    }

    fn run<U: DeserializeOwned + 'static>(&self, of: &Dataset<U>) -> Result<Vec<U>, Error> {
        let parts = driver::collect(of.id.clone()?)?;
        let mut out = Vec::new();
        for part in &parts {
            for record in records::unframe(part)? {
                out.push(records::decode(record)?);
            }
        }
        Ok(out)
    }

    /// How many records there are: each task counts its own, and only the counts
    /// come back.
    pub fn count(&self) -> Result<u64, Error> {
        let counts: Dataset<u64> = self.narrow("count", "", Vec::new());
        Ok(self.run(&counts)?.into_iter().sum())
    }

    /// The first `n` records, in partition order: each task sends at most `n`.
    pub fn take(&self, n: usize) -> Result<Vec<T>, Error> {
        let first: Dataset<T> = self.narrow("take", "", records::encode(&(n as u64))?);
        let mut out = self.run(&first)?;
        out.truncate(n);
        Ok(out)
    }

    /// The `n` records of the least keys by `key`, least first (Spark's
    /// `takeOrdered`; give a key in `std::cmp::Reverse` for the greatest): each task
    /// sends only its own `n`.
    pub fn take_ordered<K: Ord, M, S: Func<M>>(&self, n: usize, key: S) -> Result<Vec<T>, Error>
    where
        S::F: Fn(&T) -> K,
    {
        let top: Dataset<T> = self.narrow("top", key.name(), records::encode(&(n as u64))?);
        let mut out = self.run(&top)?;
        let f = key.function();
        out.sort_by_cached_key(|record| f(record));
        out.truncate(n);
        Ok(out)
    }

    /// The records folded by `f` (associative and commutative), `None` when there
    /// are none: each task folds its own.
    pub fn reduce<M, S: Func<M>>(&self, f: S) -> Result<Option<T>, Error>
    where
        S::F: Fn(T, T) -> T,
    {
        let folded: Dataset<T> = self.step("fold", &f);
        let fold = f.function();
        Ok(self.run(&folded)?.into_iter().reduce(fold))
    }
}

impl<K, V> Dataset<(K, V)>
where
    K: Serialize + DeserializeOwned + 'static,
    V: Serialize + DeserializeOwned + 'static,
{
    /// Each value through `f`, its key kept.
    pub fn map_values<W, M, S: Func<M>>(&self, f: S) -> Dataset<(K, W)>
    where
        S::F: Fn(V) -> W,
    {
        self.step("map-values", &f)
    }

    /// The values of each key folded by `f` (associative and commutative), through a
    /// shuffle into `partitions` partitions (0: as many as the dataset has); each task
    /// folds its own values of a key before they leave it (map-side combine).
    pub fn reduce_by_key<M, S: Func<M>>(&self, f: S, partitions: u32) -> Dataset<(K, V)>
    where
        S::F: Fn(V, V) -> V,
    {
        self.wide(&[], "reduce-by-key", f.name(), f.capture().to_vec(), partitions)
    }

    /// Each key with all its values, through a shuffle.
    pub fn group_by_key(&self, partitions: u32) -> Dataset<(K, Vec<V>)> {
        self.wide(&[], "group-by-key", "", Vec::new(), partitions)
    }

    /// Each key's values paired with `other`'s values of the same key, for keys both
    /// have (an inner join), through a shuffle of both.
    pub fn join<W>(&self, other: &Dataset<(K, W)>, partitions: u32) -> Dataset<(K, (V, W))> {
        self.wide(&[&other.id], "join", "", Vec::new(), partitions)
    }

    /// As [`Dataset::join`], every key of this dataset kept: `None` where `other` has
    /// no value for it.
    pub fn left_outer_join<W>(
        &self,
        other: &Dataset<(K, W)>,
        partitions: u32,
    ) -> Dataset<(K, (V, Option<W>))> {
        self.wide(&[&other.id], "left-outer-join", "", Vec::new(), partitions)
    }

    /// Each key of either dataset with both datasets' values of it.
    pub fn cogroup<W>(&self, other: &Dataset<(K, W)>, partitions: u32) -> Dataset<Cogrouped<K, V, W>> {
        self.wide(&[&other.id], "cogroup", "", Vec::new(), partitions)
    }

    /// The records sorted by key (ascending or not) across `partitions` partitions
    /// (0: as many as the dataset has), partition 0 first: as Spark's `sortByKey`, the
    /// partitions' bounds come from a sample of the keys, which runs a job of its own
    /// at once.
    pub fn sort_by_key(&self, ascending: bool, partitions: u32) -> Dataset<(K, V)> {
        let bounds = (|| -> Result<Vec<Vec<u8>>, Error> {
            let per_task = 64u64;
            let sample: Dataset<Vec<u8>> =
                self.narrow("sample", "", records::encode(&(ascending, per_task))?);
            let mut keys = self.run(&sample)?;
            keys.sort();
            let wanted = match partitions {
                0 => driver::partitions(self.id.clone()?)?,
                n => n,
            };
            let mut bounds = Vec::new();
            for i in 1..wanted as usize {
                if let Some(key) = keys.get(i * keys.len() / wanted as usize)
                    && bounds.last() != Some(key)
                {
                    bounds.push(key.clone());
                }
            }
            Ok(bounds)
        })();
        match bounds.and_then(|bounds| records::encode(&(ascending, bounds))) {
            Ok(capture) => self.wide(&[], "sort-by-key", "", capture, partitions),
            Err(e) => dataset(Err(e)),
        }
    }
}

/// A key of two datasets with each one's values of it.
pub type Cogrouped<K, V, W> = (K, (Vec<V>, Vec<W>));

/// The driver's side of datasets: the host through the contract, or the native
/// stand-in of a test.
pub(crate) mod driver {
    use super::Source;
    use super::stage::{Dep, Step};
    use crate::Error;

    #[cfg(target_arch = "wasm32")]
    mod host {
        use super::*;
        use crate::program_bindings::flint::task::datasets as wit;

        fn step(s: Step) -> wit::Step {
            wit::Step { kind: s.kind, function: s.function, capture: s.capture }
        }

        pub fn source(source: Source) -> Result<u32, Error> {
            let source = match source {
                Source::TextFile(name) => wit::Source::TextFile(name),
                Source::Parallelize { records, slices } => {
                    wit::Source::Parallelize(wit::Values { records, slices })
                }
                Source::Range(n) => wit::Source::Range(n),
            };
            wit::from_source(&source).map_err(Error::from_wit)
        }
        pub fn narrow(parent: u32, s: Step) -> Result<u32, Error> {
            wit::narrow(parent, &step(s)).map_err(Error::from_wit)
        }
        pub fn wide(parents: &[u32], d: Dep) -> Result<u32, Error> {
            let d = wit::Dependency {
                kind: d.kind,
                function: d.function,
                capture: d.capture,
                partitions: d.partitions,
            };
            wit::wide(parents, &d).map_err(Error::from_wit)
        }
        pub fn collect(id: u32) -> Result<Vec<Vec<u8>>, Error> {
            wit::collect(id).map_err(Error::from_wit)
        }
        pub fn partitions(id: u32) -> Result<u32, Error> {
            wit::partitions(id).map_err(Error::from_wit)
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    use crate::testing::program as host;

    pub(crate) fn source(source: Source) -> Result<u32, Error> {
        host::source(source)
    }
    pub(crate) fn narrow(parent: u32, step: Step) -> Result<u32, Error> {
        host::narrow(parent, step)
    }
    pub(crate) fn wide(parents: &[u32], dep: Dep) -> Result<u32, Error> {
        host::wide(parents, dep)
    }
    pub(crate) fn collect(id: u32) -> Result<Vec<Vec<u8>>, Error> {
        host::collect(id)
    }
    /// How many partitions the dataset has.
    pub(crate) fn partitions(id: u32) -> Result<u32, Error> {
        host::partitions(id)
    }
}

/// Declares a program's functions: plain functions, which a dataset's transformations
/// take and its plan names (by their path), each with a module of its own name that
/// says what the function can be used as. A function of one value maps (and flat-maps,
/// when what it returns iterates); of a borrowed value, keys, filters (returning
/// `bool`) or orders (returning something `Ord`); of two values of one type, folds.
/// List every one in [`export_program!`](crate::export_program). Declare them at a
/// module's level (each module names its function as `super::name`).
///
/// ```
/// flint_guest::functions! {
///     /// Splits a line into its words.
///     fn words(line: String) -> Vec<String> { line.split_whitespace().map(str::to_owned).collect() }
///     fn long(word: &String) -> bool { word.len() > 3 }
///     fn add(a: u64, b: u64) -> u64 { a + b }
/// }
/// fn main() {
///     assert_eq!(add(2, 3), 5);
///     use flint_guest::program::Func;
///     assert!(words.name().ends_with("words"));
/// }
/// ```
#[macro_export]
macro_rules! functions {
    () => {};
    ($(#[$meta:meta])* $vis:vis fn $name:ident($a:ident: &$at:ty $(,)?) -> $r:ty $body:block $($rest:tt)*) => {
        $(#[$meta])*
        // A filter of strings takes `&String`: the dataset's records are `String`s.
        #[allow(clippy::ptr_arg)]
        $vis fn $name($a: &$at) -> $r $body
        #[doc(hidden)]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;
            pub fn entry() -> $crate::__private::program::Entry {
                #[allow(unused_imports)]
                use $crate::__private::program::{Filter as _, NoFilter as _, NoTop as _, Top as _};
                let probe = $crate::__private::program::Probe(super::$name as fn(&$at) -> $r);
                let name = $crate::__private::program::name_of(&super::$name);
                $crate::__private::program::Entry::of_ref(name, super::$name)
                    .and((&probe).filter_use())
                    .and((&probe).top_use())
            }
        }
        $crate::functions!($($rest)*);
    };
    ($(#[$meta:meta])* $vis:vis fn $name:ident($a:ident: $at:ty, $b:ident: $bt:ty $(,)?) -> $r:ty $body:block $($rest:tt)*) => {
        $(#[$meta])*
        $vis fn $name($a: $at, $b: $bt) -> $r $body
        #[doc(hidden)]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;
            pub fn entry() -> $crate::__private::program::Entry {
                #[allow(unused_imports)]
                use $crate::__private::program::{Fold as _, NoFold as _};
                let probe = $crate::__private::program::Probe(super::$name as fn($at, $bt) -> $r);
                let name = $crate::__private::program::name_of(&super::$name);
                $crate::__private::program::Entry::of_two(name, super::$name).and((&probe).fold_use())
            }
        }
        $crate::functions!($($rest)*);
    };
    ($(#[$meta:meta])* $vis:vis fn $name:ident($a:ident: $at:ty $(,)?) -> $r:ty $body:block $($rest:tt)*) => {
        $(#[$meta])*
        $vis fn $name($a: $at) -> $r $body
        #[doc(hidden)]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;
            pub fn entry() -> $crate::__private::program::Entry {
                #[allow(unused_imports)]
                use $crate::__private::program::{FlatMap as _, NoFlatMap as _};
                let probe = $crate::__private::program::Probe(super::$name as fn($at) -> $r);
                let name = $crate::__private::program::name_of(&super::$name);
                $crate::__private::program::Entry::of_value(name, super::$name).and((&probe).flat_map_use())
            }
        }
        $crate::functions!($($rest)*);
    };
}

/// Exports a [`Program`] as a component of the `program` world, with the functions
/// its plans name (every one declared with [`functions!`](crate::functions) that it
/// uses); once per crate.
///
/// ```
/// use flint_guest::program::{Program, range};
/// flint_guest::functions! {
///     fn square(n: u32) -> u64 { u64::from(n) * u64::from(n) }
///     fn add(a: u64, b: u64) -> u64 { a + b }
/// }
/// struct Squares;
/// impl Program for Squares {
///     type Result = Option<u64>;
///     fn main() -> Result<Option<u64>, flint_guest::Error> { range(4).map(square).reduce(add) }
/// }
/// flint_guest::export_program!(Squares, [square, add]);
/// # fn main() {
/// # let out = flint_guest::testing::Local::new().program::<Squares>([]).unwrap();
/// # assert_eq!(out.result, serde_json::json!(14));
/// # }
/// ```
#[macro_export]
macro_rules! export_program {
    ($program:ty, [$($function:ident),* $(,)?]) => {
        #[doc(hidden)]
        pub struct __FlintProgram;
        impl $crate::__private::program::Registered for $program {
            fn registry() -> $crate::__private::program::Registry {
                $crate::__private::program::Registry::new([$($function::entry()),*])
            }
        }
        const _: () = {
            use $crate::program_bindings::exports::flint::task::{program_entry as program, stage};
            use $crate::bindings::flint::task::types::{Partition, TaskError};
            use $crate::map_reduce_bindings::flint::task::shuffle::{Emitter, SortedInput};
            impl program::Guest for __FlintProgram {
                fn main() -> Result<Vec<u8>, TaskError> {
                    $crate::__private::program::main::<$program>()
                }
                fn functions() -> Vec<String> {
                    $crate::__private::program::functions::<$program>()
                }
            }
            impl stage::Guest for __FlintProgram {
                fn run_source(plan: stage::Plan, input: Partition, out: Option<&Emitter>) -> Result<Vec<u8>, TaskError> {
                    $crate::__private::program::run_source::<$program>(plan, input, out)
                }
                fn run_shuffled(
                    plan: stage::Plan,
                    partition: u32,
                    input: &SortedInput,
                    out: Option<&Emitter>,
                ) -> Result<Vec<u8>, TaskError> {
                    $crate::__private::program::run_shuffled::<$program>(plan, partition, input, out)
                }
            }
        };
        // The component's exports: in a component only (a native build, for tests,
        // keeps the glue, type-checked, without the symbols).
        #[cfg(target_arch = "wasm32")]
        $crate::program_bindings::__flint_export_program!(__FlintProgram with_types_in $crate::program_bindings);
    };
}

/// The glue [`export_program!`](crate::export_program) and
/// [`functions!`](crate::functions) expand to; not part of the API.
#[doc(hidden)]
pub mod glue {
    pub use super::functions::{
        Entry, Filter, FlatMap, Fold, NoFilter, NoFlatMap, NoFold, NoTop, Probe, Registry, Top, Uses, name_of,
    };
    use super::stage::{self, Batches, Sorted};
    use super::{Program, Step};
    use crate::Error;
    use crate::bindings::flint::task::types as wit;
    use crate::map_reduce_bindings::flint::task::shuffle::{Emitter, SortedInput};
    use crate::program_bindings::exports::flint::task::stage as wit_stage;
    use crate::program_bindings::flint::task::datasets as wit_datasets;
    use std::rc::Rc;

    /// A program's declared functions.
    pub trait Registered: 'static {
        fn registry() -> Registry;
    }

    thread_local! {
        static REGISTRIES: std::cell::RefCell<std::collections::HashMap<std::any::TypeId, Rc<Registry>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }

    /// `P`'s functions, made once an instance.
    pub(crate) fn registry<P: Registered>() -> Rc<Registry> {
        let id = std::any::TypeId::of::<P>();
        if let Some(found) = REGISTRIES.with(|r| r.borrow().get(&id).cloned()) {
            return found;
        }
        let made = Rc::new(P::registry());
        REGISTRIES.with(|r| r.borrow_mut().insert(id, made.clone()));
        made
    }

    fn wit_error(e: Error) -> wit::TaskError {
        wit::TaskError { message: e.message, retryable: e.retryable }
    }

    pub fn main<P: Program>() -> Result<Vec<u8>, wit::TaskError> {
        let result = P::main().map_err(wit_error)?;
        serde_json::to_vec(&result)
            .map_err(|e| wit_error(Error::fatal(format!("cannot encode the program's result: {e}"))))
    }

    pub fn functions<P: Registered>() -> Vec<String> {
        registry::<P>().names()
    }

    fn dep(d: wit_datasets::Dependency) -> stage::Dep {
        stage::Dep { kind: d.kind, function: d.function, capture: d.capture, partitions: d.partitions }
    }

    fn plan(p: wit_stage::Plan) -> stage::Plan {
        stage::Plan {
            reads: p.reads.map(dep),
            steps: p
                .steps
                .into_iter()
                .map(|s| Step { kind: s.kind, function: s.function, capture: s.capture })
                .collect(),
            writes: p.writes.map(dep),
        }
    }

    struct HostBatches<'a>(&'a Emitter);

    impl Batches for HostBatches<'_> {
        fn emit(&mut self, batch: &[u8]) -> Result<(), Error> {
            self.0.emit(batch).map_err(Error::from_wit)
        }
    }

    struct HostSorted<'a>(&'a SortedInput);

    impl Sorted for HostSorted<'_> {
        fn next(&mut self) -> Result<Vec<u8>, Error> {
            self.0.next(1 << 20).map_err(Error::from_wit)
        }
    }

    pub fn run_source<P: Registered>(
        p: wit_stage::Plan,
        input: wit::Partition,
        out: Option<&Emitter>,
    ) -> Result<Vec<u8>, wit::TaskError> {
        let registry = registry::<P>();
        let mut batches = out.map(HostBatches);
        let out = batches.as_mut().map(|b| b as &mut dyn Batches);
        let task = crate::task_info().task_index;
        stage::run_source(&registry, &plan(p), task, input.into(), out).map_err(wit_error)
    }

    pub fn run_shuffled<P: Registered>(
        p: wit_stage::Plan,
        partition: u32,
        input: &SortedInput,
        out: Option<&Emitter>,
    ) -> Result<Vec<u8>, wit::TaskError> {
        let registry = registry::<P>();
        let mut batches = out.map(HostBatches);
        let out = batches.as_mut().map(|b| b as &mut dyn Batches);
        stage::run_shuffled(&registry, &plan(p), partition, &mut HostSorted(input), out).map_err(wit_error)
    }
}
