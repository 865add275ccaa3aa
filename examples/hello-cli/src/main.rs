//! A plain `wasi:cli` command. It is not a Flint job; tests use it to check that flint
//! refuses a component of another world with a clear message.

fn main() {
    println!("hello from a command component");
}
