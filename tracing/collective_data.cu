#include "tracing/collective_data.hpp"
