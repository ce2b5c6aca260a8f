// Shared by the C++ benches: a monotonic clock read in ns and a median.
#pragma once
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <vector>

namespace bench {

inline uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace bench
