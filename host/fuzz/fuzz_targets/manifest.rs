//! `flint.toml` manifests and the sizes, durations and settings in them: an error or a
//! value, never a panic.
#![no_main]

use flint_proto::{Manifest, Settings};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    if let Ok(manifest) = Manifest::from_toml(text) {
        let _ = manifest.limits.memory_bytes();
        let _ = manifest.limits.deadline();
        let _ = Settings::from_conf(&manifest.config);
    }
    let _ = flint_proto::config::parse_size(text);
    let _ = flint_proto::config::parse_duration(text);
    if let Some((key, value)) = text.split_once('=') {
        let conf = [(key.to_owned(), value.to_owned())].into_iter().collect();
        let _ = Settings::from_conf(&conf);
    }
});
