// Test cases that compile kernels only the LLVM backend builds (elementwise ops, reductions,
// float64 matmul, whole traced programs) carry KILN_NEEDS_LLVM among their tags. A build without
// LLVM (-DKILN_WITH_LLVM=OFF) makes them hidden ([.llvm]): they are not run and not listed to
// ctest, and tests/test_main.cpp prints how many were left out and why.
#pragma once

#ifdef KILN_WITH_LLVM
#define KILN_NEEDS_LLVM "[llvm]"
#else
#define KILN_NEEDS_LLVM "[.llvm]"
#endif
