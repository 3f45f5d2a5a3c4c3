/* placeholder: replaced by the persistence implementation */
#include "store.h"
