/* Closes the enum cl_prelude.cl opened around include/backplane_kinds.def. */
    BP_CL_BB_END_ = 0
};
#undef BP_KIND
