/* main.c -- placeholder entry point; replaced by the orchestrator's thin main. */
#include <stdio.h>
int main(void) { puts("cerea-sandbox"); return 0; }
