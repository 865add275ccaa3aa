//! Shapes of compute, free of any dependency so that `make bench` compiles this very
//! file natively and compares it with the wasm build. Each returns a digest of its
//! work that is the same natively and in wasm (no floating-point operation whose result
//! may differ), kept to 32 bits so that the tasks' digests sum without overflow.

/// An integer hash loop, as pi's: multiplies, shifts and xors on a serial chain.
pub fn hash(seed: u64, steps: u64) -> u64 {
    let (mut state, mut acc) = (seed, 0u64);
    for _ in 0..steps {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        acc ^= z ^ (z >> 31);
    }
    acc & 0xffff_ffff
}

/// One step of the f64 loops: multiplies, adds, a division and a square root (each
/// correctly rounded in IEEE 754, so native and wasm agree bit for bit).
#[inline(always)]
fn float_step(x: &mut f64, acc: &mut f64) {
    *x = *x * 1.000_000_1 + 0.25;
    if *x > 2.0 {
        *x -= 1.5;
    }
    *acc += x.sqrt() * 0.5 + 1.0 / (*x + 1.0);
}

fn float_start(seed: u64) -> (f64, f64) {
    (0.5 + (seed % 1000) as f64 * 1e-3, 0.0)
}

/// An f64 loop, one step an iteration.
pub fn float(seed: u64, steps: u64) -> u64 {
    let (mut x, mut acc) = float_start(seed);
    for _ in 0..steps {
        float_step(&mut x, &mut acc);
    }
    acc.to_bits() & 0xffff_ffff
}

/// [`float`] with four steps an iteration: the same arithmetic in the same order (so the
/// same digest), a quarter of the loop's back-edges, each of which carries the
/// runtime's deadline check in wasm.
pub fn float_by_four(seed: u64, steps: u64) -> u64 {
    let (mut x, mut acc) = float_start(seed);
    for _ in 0..steps / 4 {
        float_step(&mut x, &mut acc);
        float_step(&mut x, &mut acc);
        float_step(&mut x, &mut acc);
        float_step(&mut x, &mut acc);
    }
    for _ in 0..steps % 4 {
        float_step(&mut x, &mut acc);
    }
    acc.to_bits() & 0xffff_ffff
}

/// A memory-bound walk: a table of `entries` successors (each a step of a fixed
/// permutation) filled, then followed `steps` times, one dependent load each.
pub fn table(seed: u64, steps: u64, entries: usize) -> u64 {
    let len = entries.max(2) as u64;
    // An odd multiplier modulo a power of two is a permutation; other lengths only
    // need a successor in range.
    let table: Vec<u32> =
        (0..len).map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed | 1) % len) as u32).collect();
    let (mut at, mut acc) = ((seed % len) as usize, 0u64);
    for _ in 0..steps {
        at = table[at] as usize;
        acc = acc.wrapping_add(at as u64);
    }
    acc & 0xffff_ffff
}
