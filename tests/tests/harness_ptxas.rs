//! The benchmark harness's own kernels — the device data generator (`fill_normal_*`, every
//! dtype) and the timing lead (`lead_spin`, launched before every timed region) — compile to PTX
//! for sm_90 that `ptxas` assembles with no spills and no stack.
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_abi::DType;
use entkv_kernels::fill::fill_kernel;
use entkv_kernels::lead::lead_kernel;
use entkv_kernels::KernelModule;
use entkv_tests::{assemble_module, assert_no_spills, ptxas_available};

#[test]
fn harness_kernels_assemble_without_spills() {
    let check_ptxas = ptxas_available();
    let mut failures = Vec::new();
    for dtype in [DType::F16, DType::BF16, DType::F32] {
        let m = KernelModule {
            name: "fill",
            kernels: vec![fill_kernel(dtype).unwrap()],
        };
        failures.extend(assemble_module(&m, check_ptxas));
    }
    let m = KernelModule {
        name: "lead",
        kernels: vec![lead_kernel().unwrap()],
    };
    failures.extend(assemble_module(&m, check_ptxas));
    assert_no_spills(failures);
}
