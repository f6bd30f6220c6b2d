// A room's link check (launcher/CMakeLists.txt): the program is empty; what matters is that the
// room's whole archive links with the rooms below it alone.
int main() {
  return 0;
}
