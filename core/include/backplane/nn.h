// The model layer: modules, layers, initialisers, gradient clipping (bp::nn)
// and optimisers with learning-rate schedules (bp::optim); state dicts as
// safetensors files (bp::safetensors, bp::nn::save / load).
#pragma once

#include <backplane/nn/checkpoint.h>
#include <backplane/nn/init.h>
#include <backplane/nn/layers.h>
#include <backplane/nn/module.h>
#include <backplane/nn/utils.h>
#include <backplane/optim/lr_scheduler.h>
#include <backplane/optim/optimizer.h>
#include <backplane/safetensors.h>
