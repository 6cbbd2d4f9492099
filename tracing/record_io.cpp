#include "tracing/record_io.hpp"
