//! The Monte Carlo kernel, free of any dependency so that the benchmark compiles this
//! very file natively and compares it with the wasm build.

/// SplitMix64, as in Steele, Lea and Flood (2014).
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// How many of `points` pairs drawn from seed `task` fall inside the quarter circle.
/// Public so that the benchmark runs the very same code natively.
pub fn count_inside(task: u64, points: u64) -> u64 {
    let mut rng = SplitMix64(task);
    let mut inside = 0;
    for _ in 0..points {
        let x = rng.next_u64() >> 32;
        let y = rng.next_u64() >> 32;
        // x² + y² < 2⁶⁴, exactly as in u128: x, y < 2³² so each square fits in a u64,
        // and the sum reaches 2⁶⁴ exactly when the u64 addition overflows. Written so,
        // wasm needs no 128-bit multiply routine.
        let (_, overflows) = (x * x).overflowing_add(y * y);
        inside += u64::from(!overflows);
    }
    inside
}
