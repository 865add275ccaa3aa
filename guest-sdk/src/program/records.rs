//! A program's records between the steps of a stage (typed, in the guest) and across
//! the host (bytes). Across the host every record is in one encoding, memcomparable:
//! bytes that sort as the values do, the same type decoded from them whether they came
//! whole or as a key and a value (a pair's encoding is its key's then its value's), so
//! a shuffle orders, groups, joins and sorts by bytes alone.

use crate::Error;
use serde::de::DeserializeOwned;
use serde::ser::{self, Impossible, Serialize, SerializeTuple, Serializer};
use std::any::Any;

/// A record a step made, kept as its own type: what any later need encodes it into.
pub(crate) trait AnyRecord: Any {
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    /// The whole record, encoded.
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), Error>;
    /// A `(key, value)` record encoded, with where its key ends.
    fn encode_pair(&self, out: &mut Vec<u8>) -> Result<usize, Error>;
}

impl<T: Serialize + 'static> AnyRecord for T {
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        encode_into(self, out)
    }

    fn encode_pair(&self, out: &mut Vec<u8>) -> Result<usize, Error> {
        let mut pair = PairSplit { out, split: None, at: 0 };
        self.serialize(&mut pair).map_err(|e| Error::fatal(format!("a keyed record: {e}")))?;
        pair.split.ok_or_else(|| Error::fatal("a keyed record is not a (key, value) pair"))
    }
}

/// One record of a stage.
pub(crate) enum Rec {
    /// As a step made it.
    Typed(Box<dyn AnyRecord>),
    /// Encoded whole.
    Enc(Vec<u8>),
    /// A `(key, value)` pair encoded, its key the bytes before `split`.
    Pair(Vec<u8>, usize),
}

impl Rec {
    pub(crate) fn typed<T: Serialize + 'static>(value: T) -> Rec {
        Rec::Typed(Box::new(value))
    }

    /// The record as `T`: as it is when a step made a `T`, else decoded.
    pub(crate) fn take<T: DeserializeOwned + 'static>(self) -> Result<T, Error> {
        match self {
            Rec::Typed(record) => match record.into_any().downcast::<T>() {
                Ok(value) => Ok(*value),
                Err(_) => Err(Error::fatal(format!(
                    "a step given another type of record than its function takes ({})",
                    std::any::type_name::<T>()
                ))),
            },
            Rec::Enc(bytes) | Rec::Pair(bytes, _) => decode(&bytes),
        }
    }

    /// The record encoded whole (a pair's key and value together).
    pub(crate) fn encoded(self) -> Result<Vec<u8>, Error> {
        match self {
            Rec::Typed(record) => {
                let mut out = Vec::new();
                record.encode(&mut out)?;
                Ok(out)
            }
            Rec::Enc(bytes) | Rec::Pair(bytes, _) => Ok(bytes),
        }
    }

    /// The record as a pair, encoded, and where its key ends.
    pub(crate) fn pair(self) -> Result<(Vec<u8>, usize), Error> {
        match self {
            Rec::Typed(record) => {
                let mut out = Vec::new();
                let split = record.encode_pair(&mut out)?;
                Ok((out, split))
            }
            Rec::Pair(bytes, split) => Ok((bytes, split)),
            Rec::Enc(_) => Err(Error::fatal(
                "a keyed step was given records that are not (key, value) pairs as they reached it",
            )),
        }
    }
}

/// A typed record encoded whole.
pub(crate) fn encode_whole(record: &dyn AnyRecord) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    record.encode(&mut out)?;
    Ok(out)
}

pub(crate) fn encode_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), Error> {
    let mut serializer = memcomparable::Serializer::new(std::mem::take(out));
    let result = value.serialize(&mut serializer);
    *out = serializer.into_inner();
    result.map_err(|e| Error::fatal(format!("cannot encode a record: {e}")))
}

pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    encode_into(value, &mut out)?;
    Ok(out)
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    memcomparable::from_slice(bytes)
        .map_err(|e| Error::fatal(format!("cannot decode a record as {}: {e}", std::any::type_name::<T>())))
}

/// A task's output: its records, each a length (u32 LE) and its encoding.
pub(crate) fn frame(records: &mut Vec<u8>, record: &[u8]) {
    records.extend_from_slice(&(record.len() as u32).to_le_bytes());
    records.extend_from_slice(record);
}

/// The records of a task's output.
pub(crate) fn unframe(mut bytes: &[u8]) -> Result<Vec<&[u8]>, Error> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let cut = || Error::fatal("a task's records end inside a record");
        let len = bytes.get(..4).ok_or_else(cut)?;
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        let record = bytes.get(4..4 + len).ok_or_else(cut)?;
        out.push(record);
        bytes = &bytes[4 + len..];
    }
    Ok(out)
}

/// Serializes a 2-tuple as memcomparable would, noting where its first element ends;
/// anything else is refused.
struct PairSplit<'a> {
    out: &'a mut Vec<u8>,
    split: Option<usize>,
    at: usize,
}

#[derive(Debug)]
struct NotPair(String);

impl std::fmt::Display for NotPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotPair {}

impl ser::Error for NotPair {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        NotPair(msg.to_string())
    }
}

fn not_pair<T>() -> Result<T, NotPair> {
    Err(NotPair("not a (key, value) pair".into()))
}

impl SerializeTuple for &mut PairSplit<'_> {
    type Ok = ();
    type Error = NotPair;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), NotPair> {
        encode_into(value, self.out).map_err(|e| NotPair(e.message))?;
        self.at += 1;
        if self.at == 1 {
            self.split = Some(self.out.len());
        }
        Ok(())
    }

    fn end(self) -> Result<(), NotPair> {
        Ok(())
    }
}

macro_rules! refuse {
    ($($name:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $name(self, $(_: $arg),*) -> Result<(), NotPair> { not_pair() })*
    };
}

impl Serializer for &mut PairSplit<'_> {
    type Ok = ();
    type Error = NotPair;
    type SerializeSeq = Impossible<(), NotPair>;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Impossible<(), NotPair>;
    type SerializeTupleVariant = Impossible<(), NotPair>;
    type SerializeMap = Impossible<(), NotPair>;
    type SerializeStruct = Impossible<(), NotPair>;
    type SerializeStructVariant = Impossible<(), NotPair>;

    fn serialize_tuple(self, len: usize) -> Result<Self, NotPair> {
        if len == 2 { Ok(self) } else { not_pair() }
    }

    refuse! {
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
        serialize_str(&str), serialize_bytes(&[u8]), serialize_none(), serialize_unit(),
        serialize_unit_struct(&'static str), serialize_unit_variant(&'static str, u32, &'static str),
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), NotPair> {
        not_pair()
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, _: &T) -> Result<(), NotPair> {
        not_pair()
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), NotPair> {
        not_pair()
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NotPair> {
        not_pair()
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, NotPair> {
        not_pair()
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, NotPair> {
        not_pair()
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NotPair> {
        not_pair()
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, NotPair> {
        not_pair()
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, NotPair> {
        not_pair()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_splits_where_its_key_ends_and_reads_back_whole() {
        let (bytes, split) = Rec::typed(("word".to_owned(), 7u64)).pair().unwrap();
        assert_eq!(&bytes[..split], &encode("word").unwrap()[..]);
        assert_eq!(&bytes[split..], &encode(&7u64).unwrap()[..]);
        assert_eq!(Rec::Pair(bytes.clone(), split).take::<(String, u64)>().unwrap(), ("word".into(), 7));
        assert_eq!(Rec::Enc(bytes).take::<(String, u64)>().unwrap(), ("word".into(), 7));
        assert!(Rec::typed(3u32).pair().is_err(), "a lone value has no key");
    }

    #[test]
    fn keys_sort_as_their_values_do() {
        let words = ["", "a", "ab", "abcdefghij", "b"];
        let encoded: Vec<Vec<u8>> = words.iter().map(|w| encode(w).unwrap()).collect();
        assert!(encoded.windows(2).all(|w| w[0] < w[1]));
        let numbers = [-5i64, -1, 0, 3, i64::MAX];
        let encoded: Vec<Vec<u8>> = numbers.iter().map(|n| encode(n).unwrap()).collect();
        assert!(encoded.windows(2).all(|w| w[0] < w[1]));
    }
}
