//! The names Flint gives things, each its own type so that one cannot stand for
//! another: an executor's id is not a pod name's string, a job's id is not an
//! incarnation's number. All serialize as the plain value they wrap (the wire, the
//! event log and the status API are unchanged by the types).

use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::fmt;

/// Declares a text id: shown and serialized as its text, looked up by `&str`.
macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(id: impl Into<String>) -> $name {
                $name(id.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        /// Read as the text it is (its length, its prefix); a `&str` never stands for an id.
        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        /// Maps keyed by id are looked up by a borrowed `&str` (a URL's path, a pod's name).
        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> $name {
                $name(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> $name {
                $name(id.to_owned())
            }
        }
    };
}

string_id!(
    /// An executor's id within an application (Spark's executor id, a pod's name). The
    /// driver checks its form when it is reserved (`flint_core::registry::check_id`).
    ExecutorId
);

string_id!(
    /// A standalone worker's id (`flint worker --worker-id`, else its host and port):
    /// one machine's daemon, whatever life of it the master knows now.
    WorkerId
);

string_id!(
    /// An application's id (`flint driver --app-id`).
    AppId
);

/// Declares a numeric id: copied, ordered, shown as its number.
macro_rules! numeric_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl $name {
            /// The id after this one.
            pub fn next(self) -> $name {
                $name(self.0 + 1)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
    };
}

numeric_id!(
    /// A job's id within an application: 1, 2, … in the order jobs were submitted.
    JobId
);

numeric_id!(
    /// One life of an executor id; never reused within an application. Every report,
    /// heartbeat and loss names the incarnation it belongs to, and one that is not
    /// current is dropped.
    Incarnation
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_serialize_as_the_values_they_wrap() {
        assert_eq!(serde_json::to_string(&ExecutorId::new("exec-1")).unwrap(), "\"exec-1\"");
        assert_eq!(serde_json::to_string(&JobId(7)).unwrap(), "7");
        assert_eq!(postcard::to_stdvec(&Incarnation(300)).unwrap(), postcard::to_stdvec(&300u64).unwrap());
        assert_eq!(format!("{} {}", JobId(7), ExecutorId::from("a")), "7 a");
    }
}
