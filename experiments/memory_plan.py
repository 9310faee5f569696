"""(work in progress, scale helper) Memory plan: AOT-compile the train step on virtual meshes."""
