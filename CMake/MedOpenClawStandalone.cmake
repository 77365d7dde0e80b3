# Standalone (no Slicer SDK) configuration of the MedOpenClaw extension tree.
#
# Slicer's extension macros are replaced by functions that check what can be checked without the Slicer
# application: every file a module lists exists, every module script parses and follows the scripted-module
# contract, and the pytest suite (one ctest per test folder) runs against the venv that has slicer-core.
# The module test classes (ScriptedLoadableModuleTest) need the Slicer application: they are registered by
# slicer_add_python_unittest only in a real extension build.

include_guard(GLOBAL)

option(BUILD_TESTING "Register the MedOpenClaw tests with ctest" ON)
enable_testing()

# Prefer an activated virtual environment (the one with slicer-core, vtk and pytest).
set(Python3_FIND_VIRTUALENV FIRST)
find_package(Python3 3.10 COMPONENTS Interpreter REQUIRED)

set(_medopenclaw_root "${CMAKE_CURRENT_LIST_DIR}/..")
get_filename_component(_medopenclaw_root "${_medopenclaw_root}" ABSOLUTE)

execute_process(
  COMMAND "${Python3_EXECUTABLE}" -c "import pytest, slicer, vtk, jsonschema"
  RESULT_VARIABLE _medopenclaw_missing_imports
  OUTPUT_QUIET ERROR_QUIET
  )
if(NOT _medopenclaw_missing_imports EQUAL 0)
  message(WARNING
    "${Python3_EXECUTABLE} cannot import pytest/slicer/vtk/jsonschema: the tests will fail. "
    "Activate the project's virtual environment (pip install -e '.[test]') or pass -DPython3_EXECUTABLE=...")
endif()

if(WIN32)
  set(_medopenclaw_path_separator "\\;")
else()
  set(_medopenclaw_path_separator ":")
endif()
# The suite's cohort cache is the build tree's (one per build, shared by demo_cohort and every test that reads the
# cohort), never the user's ~/.cache/medopenclaw (about 300 MB per cohort fingerprint); MEDOPENCLAW_CACHE set when
# configuring chooses another.
if(DEFINED ENV{MEDOPENCLAW_CACHE})
  set(_medopenclaw_test_cache "$ENV{MEDOPENCLAW_CACHE}")
else()
  set(_medopenclaw_test_cache "${CMAKE_BINARY_DIR}/cohort-cache")
endif()
# The suite's cohort has two cases per module, not the demo's six: no test reads the images of a third case (the
# access times of a cached cohort after a whole run), and generating the other four was about two thirds of the
# cohort's CPU. A test that needs more cases than that makes its own cohort. Plain pytest has the same (conftest.py).
set(MEDOPENCLAW_TEST_COHORT_CASES 2)
# Every process the suite starts (pytest, the CLI as a user types it, viewers, the cohort's workers, Ray's) compiles
# a module once for the whole run, into the build tree's pycache: with bytecode writing off (as it was, and as an
# outer PYTHONDONTWRITEBYTECODE would have it) each one compiled every module it imported from source, the
# project's and, after uv (which installs no bytecode), numpy's, scipy's and Starlette's too: 1.2 s more CPU per CLI
# start (1.75 against 0.52 s), the runtime group 72 -> 56 s of CPU. The source tree and the venv stay untouched.
# One math-library thread per test process: ctest -j already keeps every core busy with a test each, and torch's and
# the BLAS libraries' own thread pools then only compete with the other test (the operators group, which runs
# VISTA3D on torch, took 27 -> 20 s of CPU with one thread; groups without torch were unchanged).
set(MEDOPENCLAW_TEST_ENVIRONMENT
  "PYTHONPATH=${_medopenclaw_root}/MedOpenClaw${_medopenclaw_path_separator}${_medopenclaw_root}/MedCopilot"
  "QT_QPA_PLATFORM=offscreen"
  "PYTHONDONTWRITEBYTECODE="
  "PYTHONPYCACHEPREFIX=${CMAKE_BINARY_DIR}/pycache"
  "PYTHONFAULTHANDLER=1"
  "MEDOPENCLAW_CACHE=${_medopenclaw_test_cache}"
  "MEDOPENCLAW_COHORT_CASES=${MEDOPENCLAW_TEST_COHORT_CASES}"
  "OMP_NUM_THREADS=1"
  "OPENBLAS_NUM_THREADS=1"
  "MKL_NUM_THREADS=1"
  )

#-----------------------------------------------------------------------------
function(slicerMacroBuildScriptedModule)
  cmake_parse_arguments(MODULE "WITH_GENERIC_TESTS;WITH_SUBDIR" "NAME" "SCRIPTS;RESOURCES" ${ARGN})
  if(NOT MODULE_NAME)
    message(FATAL_ERROR "slicerMacroBuildScriptedModule: NAME is required")
  endif()
  set(_absolute_scripts)
  foreach(_file IN LISTS MODULE_SCRIPTS MODULE_RESOURCES)
    if(NOT EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${_file}")
      message(FATAL_ERROR "${MODULE_NAME}: ${_file} is listed in CMakeLists.txt but does not exist")
    endif()
  endforeach()
  foreach(_script IN LISTS MODULE_SCRIPTS)
    list(APPEND _absolute_scripts "${CMAKE_CURRENT_SOURCE_DIR}/${_script}")
  endforeach()
  if(BUILD_TESTING)
    add_test(
      NAME ${MODULE_NAME}_ScriptedModuleContract
      COMMAND "${Python3_EXECUTABLE}" "${_medopenclaw_root}/CMake/check_scripted_module.py"
              --module ${MODULE_NAME} ${_absolute_scripts}
      )
  endif()
endfunction()

#-----------------------------------------------------------------------------
function(slicer_add_python_unittest)
  cmake_parse_arguments(UNITTEST "" "SCRIPT" "SLICER_ARGS" ${ARGN})
  message(STATUS "${UNITTEST_SCRIPT}: its ScriptedLoadableModuleTest runs only in a Slicer extension build")
endfunction()

#-----------------------------------------------------------------------------
# One ctest per test folder: Testing/Python mirrors the packages (runtime, server, viewer, bench/agents, ...), and
# the test_*.py files directly inside a folder are its ctest pytest_<folder> (bench/report -> pytest_bench_report).
# A folder that grows near the timeout is split into sub-folders, as bench/ is. The groups that read the embedded
# demo cohort wait for the 'demo_cohort' test, which generates it once into the shared cache (about 10 minutes
# after the cohort changed, seconds otherwise), so no group pays for the generation inside its own timeout.
set(MEDOPENCLAW_COHORT_GROUPS bench bench_agents docs providers worker)

function(medopenclaw_add_pytest_suite)
  cmake_parse_arguments(SUITE "" "" "TEST_DIRECTORIES" ${ARGN})
  if(NOT BUILD_TESTING)
    return()
  endif()
  set(_groups)
  foreach(_directory IN LISTS SUITE_TEST_DIRECTORIES)
    file(GLOB_RECURSE _test_files CONFIGURE_DEPENDS "${_directory}/test_*.py")
    foreach(_test_file IN LISTS _test_files)
      get_filename_component(_folder "${_test_file}" DIRECTORY)
      file(RELATIVE_PATH _group "${_directory}" "${_folder}")
      if(_group STREQUAL "")
        message(FATAL_ERROR "${_test_file}: tests live in the folder of the package they exercise, not at the top")
      endif()
      string(REPLACE "/" "_" _group "${_group}")
      list(APPEND _groups ${_group})
      list(APPEND _files_${_group} "${_test_file}")
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES _groups)
  list(SORT _groups)
  # the lint the quality bar asks for, in the same test command as the suite (ruff is in the [test] extra)
  add_test(
    NAME ruff
    COMMAND "${Python3_EXECUTABLE}" -m ruff check --no-cache MedOpenClaw MedCopilot Testing scripts
    WORKING_DIRECTORY "${_medopenclaw_root}"
    )
  add_test(
    NAME demo_cohort
    COMMAND "${Python3_EXECUTABLE}" -m MedOpenClawLib.cli bench cohort --cache
    WORKING_DIRECTORY "${_medopenclaw_root}"
    )
  set_tests_properties(demo_cohort PROPERTIES ENVIRONMENT "${MEDOPENCLAW_TEST_ENVIRONMENT}" TIMEOUT 1800
    FIXTURES_SETUP demo_cohort)
  # Each group's temporary files go under the build tree, one folder per group: pytest otherwise numbers every
  # session's folder under one /tmp root and deletes all but the newest three at a session's start and end, so each
  # group spent its own time deleting the folders of the groups before it (the larger groups' traces and cohorts).
  # pytest empties a group's folder when the group starts again.
  set(_medopenclaw_pytest_temp "${CMAKE_BINARY_DIR}/pytest-temp")
  file(MAKE_DIRECTORY "${_medopenclaw_pytest_temp}")
  foreach(_group IN LISTS _groups)
    list(SORT _files_${_group})
    # hypothesis's pytest plugin imports hypothesis into every pytest process (~0.5 s CPU): only a group whose
    # test files use it keeps the plugin
    set(_plugins -p no:hypothesispytest)
    foreach(_test_file IN LISTS _files_${_group})
      file(STRINGS "${_test_file}" _uses REGEX "^(from|import) hypothesis" LIMIT_COUNT 1)
      if(_uses)
        set(_plugins)
      endif()
    endforeach()
    add_test(
      NAME pytest_${_group}
      COMMAND "${Python3_EXECUTABLE}" -m pytest -q -p no:cacheprovider ${_plugins}
        "--basetemp=${_medopenclaw_pytest_temp}/${_group}" ${_files_${_group}}
      WORKING_DIRECTORY "${_medopenclaw_root}"
      )
    # pytest exits 5 when it collects nothing: report the group as skipped, not as a failure
    set_tests_properties(pytest_${_group} PROPERTIES ENVIRONMENT "${MEDOPENCLAW_TEST_ENVIRONMENT}" TIMEOUT 900
      SKIP_RETURN_CODE 5)
    if(_group IN_LIST MEDOPENCLAW_COHORT_GROUPS)
      set_tests_properties(pytest_${_group} PROPERTIES FIXTURES_REQUIRED demo_cohort)
    endif()
  endforeach()
endfunction()

#-----------------------------------------------------------------------------
# ctest -j starts the tests that others wait for first (demo_cohort), then the rest in descending COST. A fresh
# clone has no CTestCostData.txt, so without these every test costs 0 and they start in declaration order, which
# can leave the longest group for the end with one slot idle. The figures are the seconds of CI's fresh-clone run
# on 2 cores (python scripts/bench_suite.py, bench/suite.json); a test not listed costs 0 and fills the gaps.
set(MEDOPENCLAW_TEST_COSTS
  demo_cohort=161 pytest_bench=213 pytest_server=137 pytest_providers=115 pytest_docs=82
  pytest_bench_synthetic=69 pytest_runtime=63 pytest_bench_agents=49 pytest_operators=35
  slicer_python_slicer-5.10=33 slicer_python_slicer-5.12=33 pytest_bench_report=31 pytest_pathology=28
  pytest_bench_loaders=27 pytest_copilot=21 pytest_gui=21 pytest_worker=16 pytest_viewer=15 pytest_trace_audit=14)

function(medopenclaw_set_test_costs)
  foreach(_entry IN LISTS MEDOPENCLAW_TEST_COSTS)
    string(REPLACE "=" ";" _pair "${_entry}")
    list(GET _pair 0 _test)
    list(GET _pair 1 _cost)
    if(TEST ${_test})
      set_tests_properties(${_test} PROPERTIES COST ${_cost})
    endif()
  endforeach()
endfunction()

#-----------------------------------------------------------------------------
# One ctest per supported 3D Slicer release (Testing/SlicerReleases/slicer-*.txt): the in-Slicer code under that
# release's Python and bundled packages, in the venv scripts/setup_slicer_pythons.sh made (SKIP without it).
function(medopenclaw_add_slicer_release_tests)
  if(NOT BUILD_TESTING)
    return()
  endif()
  if(DEFINED ENV{MEDOPENCLAW_SLICER_VENVS})
    set(_venvs "$ENV{MEDOPENCLAW_SLICER_VENVS}")
  else()
    set(_venvs "${_medopenclaw_root}/.venv-slicer")
  endif()
  file(GLOB _releases CONFIGURE_DEPENDS "${_medopenclaw_root}/Testing/SlicerReleases/slicer-*.txt")
  foreach(_requirements IN LISTS _releases)
    get_filename_component(_release "${_requirements}" NAME_WLE)
    # one check per distinct Python and package set (comments aside): the preview pins what 5.12 pins today
    file(STRINGS "${_requirements}" _lines REGEX "^([^#]|# python:)")
    list(TRANSFORM _lines REPLACE "[ ]+#.*$" "")
    string(SHA256 _packages "${_lines}")
    if(DEFINED _medopenclaw_release_${_packages})
      message(STATUS "${_release}: the same Python and packages as ${_medopenclaw_release_${_packages}}, checked once")
      continue()
    endif()
    set(_medopenclaw_release_${_packages} ${_release})
    set(_python "${_venvs}/${_release}/bin/python")
    add_test(
      NAME slicer_python_${_release}
      COMMAND sh -c "[ -x \"$0\" ] || { echo \"no venv for ${_release}: run scripts/setup_slicer_pythons.sh\"; exit 5; }; exec \"$0\" \"$1\""
              "${_python}" "${_medopenclaw_root}/scripts/check_slicer_release.py"
      WORKING_DIRECTORY "${_medopenclaw_root}"
      )
    # its worker test runs `bench run` on the cached demo cohort (worker/test_worker_process_tree.py). The suite's
    # environment, as every group's: the check and the processes its tests start compile a module once, into the build
    # tree's pycache (under an outer PYTHONDONTWRITEBYTECODE each compiled what it imports from source again: every
    # MedCopilot model process the release's openai SDK and pydantic, 4.5 against 2.2 s of CPU), the configured
    # cohort cache, one math-library thread
    set_tests_properties(slicer_python_${_release} PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 5
      FIXTURES_REQUIRED demo_cohort ENVIRONMENT "${MEDOPENCLAW_TEST_ENVIRONMENT}")
  endforeach()
endfunction()
