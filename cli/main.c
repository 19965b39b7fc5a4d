/* placeholder entry point; replaced by the full CLI */
#include <stdio.h>
#include "lofp/lofp.h"
int main(void) { printf("lofp %s\n", lofp_version()); return 0; }
