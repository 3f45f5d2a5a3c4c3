/* placeholder: replaced by the orchestrator implementation */
#include "common.h"
