/*
 * Decimal text to double, exactly and fast for the common case.
 *
 * Prometheus answers carry every value as a decimal string and every time as a JSON
 * number; a history reading converts millions of them, and glibc's strtod spends most of
 * its time in arbitrary-precision arithmetic it needs only for long or extreme inputs.
 * fs_decimal_exact takes the inputs whose correctly rounded value one IEEE operation
 * gives (at most 19 significant digits whose integer fits in 2^53, a power of ten within
 * 10^±22: Clinger's fast path) and declines the rest, which the caller converts with
 * strtod. It never returns a value that differs from strtod's in the C locale.
 */
#ifndef FS_UTIL_DECIMAL_H
#define FS_UTIL_DECIMAL_H

#include <stdbool.h>
#include <stddef.h>

/**
 * Converts s[0..len) when it is wholly [-+]digits[.digits][(e|E)[-+]digits] and exact by
 * the fast path; true with *out set. false (and *out untouched) for anything else: NaN,
 * Inf, hex, spaces, too many digits, an exponent too far, an empty or partial number.
 */
bool fs_decimal_exact(const char *s, size_t len, double *out);

/** fs_decimal_exact, else strtod over a NUL-terminated copy: true when the whole of
 *  s[0..len) is a number (len under 64), as strtod reads it. */
bool fs_decimal_parse(const char *s, size_t len, double *out);

#endif
