//! Snapshot threads made up for the tests.

use sdt_abi::regs::UserRegs;
use sdt_store::{ThreadRunState, ThreadState};

/// Thread `tid` of a snapshot, in `state`, with registers `regs`.
pub fn thread_with(tid: i32, regs: UserRegs, state: ThreadRunState) -> ThreadState {
    ThreadState {
        tid,
        name: "t".into(),
        state,
        gpregs: bytemuck::bytes_of(&regs).to_vec(),
        fpregs: Vec::new(),
        xstate: Vec::new(),
        sigmask: 0,
        rseq: None,
        robust_list: None,
        altstack: None,
    }
}
