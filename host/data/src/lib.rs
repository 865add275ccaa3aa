//! Where jobs' inputs come from and how they are read, shared by the driver (which
//! plans them) and executors (which read them): input URLs, line splits over ranged
//! reads, S3 and HTTPS objects, and the tokens of the driver's own data service.

pub mod error;
pub mod guard;
pub mod inputs;
pub mod lines;
pub mod objects;
pub mod token;

pub use error::InputError;
pub use inputs::{InputUrl, UrlError};
pub use lines::SplitLines;
pub use objects::{ObjectReader, S3_SERVICE};
pub use token::{Claims, DataKey};
