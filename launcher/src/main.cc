#include <cstdio>
int main() { std::puts("acc-launch"); return 0; }
