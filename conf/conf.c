/* placeholder: replaced by the conf implementation */
#include "conf.h"
