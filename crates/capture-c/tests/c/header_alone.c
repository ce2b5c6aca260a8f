/* looptime.h compiled on its own, as strict C99, with nothing included
 * before it: the header brings every type it uses. Built (not run) by
 * ctest's build; a header that needs another include first fails here. */
#include "looptime.h"

int looptime_header_alone(void);

int looptime_header_alone(void) { return LOOPTIME_OK; }
