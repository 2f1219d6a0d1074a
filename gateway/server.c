/* placeholder */
#include <stdio.h>
