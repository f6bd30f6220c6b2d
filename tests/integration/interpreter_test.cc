// The interpreter of .py programs and -m, rung by rung, as a torchrun user expects it: --python,
// then $PYTHON_EXEC, then the Python of the environment acc-launch is installed in (the python
// beside the binary, as a wheel puts it into a venv's bin/), then python3 on PATH. Each test runs
// a copy of the real binary from where a user would have it.

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;

std::string quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// acc-launch copied into `bin` (a venv's bin/, say), as an installed wheel has it.
std::string install_into(const std::string& bin) {
  fs::create_directories(bin);
  const std::string copy = bin + "/acc-launch";
  std::error_code error;
  fs::create_hard_link(launcher_binary(), copy, error);
  if (error) fs::copy_file(launcher_binary(), copy);
  return copy;
}

// Runs `binary` with `args` through env(1): `env_args` first (NAME=VALUE, or -u NAME), from `dir`.
LaunchRun run_binary(const std::string& binary, const std::vector<std::string>& env_args,
                     const std::vector<std::string>& args, const std::string& dir) {
  std::string command = "cd " + quoted(dir) + " && env -u PYTHON_EXEC";
  for (const std::string& arg : env_args) command += " " + quoted(arg);
  command += " " + quoted(binary);
  for (const std::string& arg : args) command += " " + quoted(arg);
  command += " >out.txt 2>err.txt </dev/null";
  const int status = std::system(command.c_str());
  LaunchRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_text(dir + "/out.txt");
  run.err = read_text(dir + "/err.txt");
  return run;
}

// A stand-in interpreter that names itself, then runs the script with Debian's Python.
void fake_python(const std::string& path, const std::string& name) {
  std::ofstream(path) << "#!/bin/sh\necho 'interpreter " << name
                      << "'\nexec /usr/bin/python3 \"$@\"\n";
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
}

TEST(InterpreterTest, AVenvsAccLaunchRunsTheVenvsPythonWithoutActivation) {
  const TempDir dir;
  const std::string venv = dir.path() + "/venv";
  ASSERT_EQ(std::system(("/usr/bin/python3 -m venv --without-pip " + quoted(venv)).c_str()), 0);
  const std::string binary = install_into(venv + "/bin");
  const std::string script =
      dir.file("prefix.py", "import sys\nprint('prefix', sys.prefix, sys.executable)\n");
  // As a SLURM script does: the venv not activated, PATH without it.
  const LaunchRun run =
      run_binary(binary, {"PATH=/usr/bin:/bin"}, {"--nproc_per_node", "1", script}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  // The venv's python is run through its bin/ path (a symlink, not resolved): sys.prefix is the
  // venv, which is what makes its site-packages importable.
  EXPECT_NE(run.out.find("[rank0]: prefix " + venv + " " + venv + "/bin/python\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("Python workers run " + venv + "/bin/python (beside acc-launch)"),
            std::string::npos)
      << run.err;
}

TEST(InterpreterTest, PythonExecComesBeforeThePythonBesideTheBinary) {
  const TempDir dir;
  const std::string binary = install_into(dir.path() + "/bin");
  fake_python(dir.path() + "/bin/python", "beside");
  fake_python(dir.path() + "/exec-python", "exec");
  const std::string script = dir.file("hello.py", "print('hello')\n");
  const LaunchRun run = run_binary(binary, {"PYTHON_EXEC=" + dir.path() + "/exec-python"},
                                   {"--nproc_per_node", "1", script}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_NE(run.out.find("[rank0]: interpreter exec\n[rank0]: hello\n"), std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("($PYTHON_EXEC)"), std::string::npos) << run.err;
}

TEST(InterpreterTest, ThePythonFlagComesFirst) {
  const TempDir dir;
  const std::string binary = install_into(dir.path() + "/bin");
  fake_python(dir.path() + "/bin/python", "beside");
  fake_python(dir.path() + "/exec-python", "exec");
  fake_python(dir.path() + "/flag-python", "flag");
  const std::string script = dir.file("hello.py", "print('hello')\n");
  const LaunchRun run = run_binary(
      binary, {"PYTHON_EXEC=" + dir.path() + "/exec-python"},
      {"--python", dir.path() + "/flag-python", "--nproc_per_node", "1", script}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_NE(run.out.find("[rank0]: interpreter flag\n[rank0]: hello\n"), std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("flag-python (--python)"), std::string::npos) << run.err;
}

TEST(InterpreterTest, ThePythonBesideTheBinaryRunsModulesToo) {
  const TempDir dir;
  const std::string binary = install_into(dir.path() + "/bin");
  fake_python(dir.path() + "/bin/python", "beside");
  const LaunchRun run =
      run_binary(binary, {}, {"--dry_run", "-m", "mypackage.train", "--lr", "1"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("# python: " + dir.path() + "/bin/python (beside acc-launch)\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("command: " + dir.path() + "/bin/python -u -m mypackage.train --lr 1"),
            std::string::npos)
      << run.out;
}

TEST(InterpreterTest, Python3OnPathWhenNothingElseNamesOne) {
  // The build's binary has no python beside it.
  ASSERT_FALSE(fs::exists(fs::path(launcher_binary()).parent_path() / "python"));
  ASSERT_FALSE(fs::exists(fs::path(launcher_binary()).parent_path() / "python3"));
  const LaunchRun run = run_launcher({"--dry_run", "train.py"}, {{"PYTHON_EXEC", ""}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("# python: python3 (python3 on PATH)\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("command: python3 -u train.py"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace acc::testing
