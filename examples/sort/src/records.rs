//! The records the sort job generates, shared with the checks that recompute them
//! natively (`tests/`): a 10-byte key and a 90-byte value, from a seed per map task.

/// Bytes of a key.
pub const KEY: usize = 10;
/// Bytes of a value.
pub const VALUE: usize = 90;

/// SplitMix64: small, fast, and the same everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The `count` records of map `index`, each a key and a value.
pub fn generate(index: u32, count: u64, mut each: impl FnMut(&[u8; KEY], &[u8; VALUE])) {
    let mut rng = Rng::new(u64::from(index) + 1);
    let (mut key, mut value) = ([0u8; KEY], [0u8; VALUE]);
    for _ in 0..count {
        let (a, b) = (rng.next_u64(), rng.next_u64());
        key[..8].copy_from_slice(&a.to_be_bytes());
        key[8..].copy_from_slice(&b.to_be_bytes()[..2]);
        // The value names its map and carries filler, as TeraSort's rows do.
        let filler = rng.next_u64().to_le_bytes();
        for (i, byte) in value.iter_mut().enumerate() {
            *byte = filler[i % 8] ^ (i as u8);
        }
        value[..4].copy_from_slice(&index.to_be_bytes());
        each(&key, &value);
    }
}

/// A record's share of the checksum (FNV-1a of key and value); the checksum of a set of
/// records is the wrapping sum of their shares, so it does not depend on their order.
pub fn share(key: &[u8], value: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key.iter().chain(value) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}
