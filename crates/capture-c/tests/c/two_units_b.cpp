// The second translation unit including looptime.hpp: linked with
// two_units_a.cpp, a function defined in the header without `inline`
// would be defined twice and the link would fail.
#include "looptime.hpp"

uint32_t second_unit_stage_count() {
    looptime::Builder b;
    b.stage("b1");
    return b.stage("b2") + 1;  // ids 0, 1: two stages
}
