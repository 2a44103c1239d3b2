// The public header must be usable from C++ (extern "C", no C-only syntax).
#include "ladle.h"

int main()
{
    ladle_window w;
    ladle_window_init(&w, 2);
    return ladle_version_number() == LADLE_VERSION_NUMBER ? 0 : 1;
}
