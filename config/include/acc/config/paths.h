#pragma once

// Where Accelerate (and so acc-launch) keeps its default config file
// (accelerate/commands/config/config_args.py): $HF_HOME/accelerate, else
// $XDG_CACHE_HOME/huggingface/accelerate, else ~/.cache/huggingface/accelerate; the file is
// default_config.yaml. Reads the process environment; thread-safe while nobody calls setenv.

#include <string>

namespace acc::config {

// The directory, with ~ expanded (from $HOME).
std::string default_config_dir();
// default_config_dir() + "/default_config.yaml".
std::string default_config_path();
// os.path.expanduser: a leading "~" or "~/" is $HOME; "~user" is left as it is.
std::string expand_user(const std::string& path);
// Whether `path` names an existing regular file.
bool file_exists(const std::string& path);

}  // namespace acc::config
