//! `autotune --alpha 1.5 --head-dim 32`: tile-config search on the GPU (issue #5); see
//! `entkv_autotune::tune::command`.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Candidates are JIT-compiled by copies of this binary (entkv_autotune::jit_pool).
    let serves = entkv_autotune::jit_pool::serve_if_worker();
    entkv_autotune::tune::command::main(serves)
}
