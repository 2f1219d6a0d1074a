/* placeholder: replaced by the posix store */
#include "backend.h"
