// Catch for test files that include LibTorch: its logging (glog) defines CHECK too, so this header
// comes after every LibTorch include and makes Catch's CHECK the one in force.
#pragma once

#include <ATen/ATen.h>

#undef CHECK
#include <catch2/catch.hpp>
