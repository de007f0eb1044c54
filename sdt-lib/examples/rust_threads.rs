//! A Rust program with offline breakpoints:
//!
//! ```sh
//! cargo build --release --examples
//! sdt run -- target/release/examples/rust_threads
//! ```

use std::sync::Barrier;

fn main() {
    let workers = 3;
    println!("{:?}", sdt::breakpoint!(1, 1, 1, 0, "phase=start"));
    let barrier = Barrier::new(workers + 1);
    let results: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers as u64)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    let sum = (0..1000 * (i + 1)).sum::<u64>();
                    barrier.wait(); // every worker is alive at breakpoint 2
                    barrier.wait();
                    sum
                })
            })
            .collect();
        barrier.wait();
        println!("{:?}", sdt::breakpoint!(2, 1, 2, 0, "phase=threads"));
        barrier.wait();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!("sums {results:?}");
}
