# test/abi.sh builds test/abi_consumer.c against an installed ladle with this
# (copied as CMakeLists.txt): find_package(ladle) must bring the headers, the
# library and MPI.
cmake_minimum_required(VERSION 3.10)
project(ladle_consumer C)
find_package(ladle 0.2 REQUIRED)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE ladle::ladle)
