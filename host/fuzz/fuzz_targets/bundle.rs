//! Bundle files as `flint run` and `flint submit` read them: an error or a bundle.
#![no_main]

use flint_proto::Bundle;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let mut framed = b"FLINTBDL\x01\0\0\0".to_vec();
    framed.extend_from_slice(bytes);
    for input in [bytes, &framed[..]] {
        if let Ok(bundle) = Bundle::decode(input) {
            assert_eq!(Bundle::decode(&bundle.encode()).expect("re-encodes"), bundle);
            let _ = bundle.manifest.limits.memory_bytes();
            let _ = bundle.manifest.limits.deadline();
        }
    }
});
