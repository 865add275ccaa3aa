//! Where jobs' inputs come from and how they are read, shared by the driver (which
//! plans them) and executors (which read them): input URLs, line splits over ranged
//! reads, S3 and HTTPS objects, the tokens of the driver's own data service, and part
//! output to S3.

pub mod error;
pub mod guard;
pub mod inputs;
pub mod lines;
pub mod objects;
pub mod outputs;
pub mod stream;
pub mod token;

pub use error::InputError;
pub use inputs::{InputUrl, MAX_FILES, UrlError, glob_base, is_glob, local_files};
pub use lines::SplitLines;
pub use objects::{ObjectReader, S3_SERVICE, WholeRead};
pub use outputs::{ObjectOutput, OutputError, PartUpload};
pub use stream::StreamLines;
pub use token::{Claims, DataKey};
