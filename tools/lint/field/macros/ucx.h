/* UCX's attribute macros (src/ucs/sys/compiler_def.h) that keep spatch from parsing the
 * declarations they are in: given to cmsafe-lint --macros for UCX's sources. */
#define UCS_V_UNUSED
#define UCS_F_ALWAYS_INLINE
#define UCS_F_NOINLINE
#define UCS_F_MAYBE_UNUSED
