/* placeholder: replaced by the transport implementation */
#include "transport.h"
