// SPDX-License-Identifier: BSD-3-Clause
// Shared by the fuzz targets: a violated property aborts with a message
// (libFuzzer then saves the input as crash-*).
#ifndef ZV_TEST_FUZZ_COMMON_H
#define ZV_TEST_FUZZ_COMMON_H

#include <cstdio>
#include <cstdlib>

#define ZV_FUZZ_CHECK(cond)                                                     \
    do {                                                                        \
        if (!(cond)) {                                                          \
            std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__,    \
                         __LINE__, #cond);                                      \
            std::abort();                                                       \
        }                                                                       \
    } while (0)

namespace zv::fuzz {

/// Reads the fuzzer's input front to back; past the end it yields zeros.
class input {
public:
    input(const unsigned char *data, size_t size) : m_p(data), m_end(data + size) {}
    bool empty() const { return m_p == m_end; }
    unsigned char u8() { return (m_p < m_end) ? *m_p++ : 0; }
    unsigned u16() { unsigned lo = u8(); return lo | (unsigned(u8()) << 8); }

private:
    const unsigned char *m_p;
    const unsigned char *m_end;
};

/// Touch every byte of [p, p + len): ASAN reports it if any lies outside
/// the input the parser was given.
inline unsigned read_all(const char *p, size_t len)
{
    unsigned sum = 0;
    for (size_t i = 0; i < len; ++i) {
        sum += static_cast<unsigned char>(p[i]);
    }
    return sum;
}

} // namespace zv::fuzz

#endif
