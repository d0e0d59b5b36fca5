// The migration part (patterns/migration.h) of every pattern that has one:
// `remold migrate` includes this one header.
#pragma once

#include "patterns/attribute/migration.h"
#include "patterns/bucket/migration.h"
#include "patterns/computed/migration.h"
#include "patterns/migration.h"
#include "patterns/patterns.h"
#include "patterns/versioned/migration.h"
