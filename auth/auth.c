/* placeholder: replaced by the auth implementation */
#include "auth.h"
