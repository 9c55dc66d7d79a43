// The float erf both CPU backends emit: erf(y) = y P(y^2) / Q(y^2) for y clamped to [-4, 4] (erf
// is +-1 to float precision beyond), a few ulp. Coefficients from the highest degree down, for
// Horner's scheme. One copy, so the LLVM loop nests and the x86 GEMM epilogue agree (the x86 gelu
// evaluates the same ratio in terms of x = y sqrt 2, clamped at 5.6: x86/vec_emit.cpp).
#pragma once

#include <array>

namespace kiln::erf_rational {

inline constexpr double kClamp = 4.0;
inline constexpr std::array<double, 7> kP = {
    -2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02};
inline constexpr std::array<double, 5> kQ = {-1.45660718464996e-05, -2.13374055278905e-04,
                                             -1.68282697438203e-03, -7.37332916720468e-03,
                                             -1.42647390514189e-02};

}  // namespace kiln::erf_rational
