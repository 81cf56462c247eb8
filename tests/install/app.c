#include <clattn/clattn.h> /* first, and no CL_TARGET_OPENCL_VERSION: the header must not pick one */
#include <stdio.h>
#include <string.h>

int main(void) {
    /* Declared only from OpenCL 2.0 on; referencing it needs no device. */
    cl_command_queue (CL_API_CALL *volatile create_queue)(cl_context, cl_device_id, const cl_queue_properties *,
        cl_int *) = clCreateCommandQueueWithProperties;
    const char *zero = clattn_status_string(CLATTN_ERROR_ZERO_SIZE);
    printf("clattn %s: %s\n", clattn_version_string(), zero);
    return create_queue != NULL && strcmp(zero, "CLATTN_ERROR_ZERO_SIZE") == 0 ? 0 : 1;
}
