// Whether the ranks of a job read from Chakra traces communicate consistently: what the simulator
// needs of them before it runs them (it matches each rank's k-th collective over a group with every
// other member's k-th).
#pragma once

#include <string>
#include <vector>

#include "chakra/import.hpp"

namespace paradyse::chakra {

// InputError, naming the file and the node, unless every rank issues the collectives and transfers of
// each group it is in in the same order, of the same kind and size as every other member, each
// transfer's peer receiving from it (or sending to it) at the same place.
void check_collectives_match(const std::vector<RankTrace>& ranks, const std::vector<std::string>& sources);

}  // namespace paradyse::chakra
