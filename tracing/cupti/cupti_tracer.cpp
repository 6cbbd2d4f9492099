#include "tracing/cupti/cupti_tracer.hpp"
