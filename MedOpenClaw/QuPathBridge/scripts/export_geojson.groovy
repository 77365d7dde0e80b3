/*
 * BRACS ships its ROI annotations as QuPath project data (.qpdata). MedFlow-Bench's BRACS loader reads them as
 * GeoJSON, one <image name>.geojson per slide. Open the BRACS annotation project in QuPath (0.4 or later) and
 * run this script for every image: Automate > Script editor > Run > Run for project. It writes
 * <project>/geojson/BRACS_<id>.geojson; put that folder anywhere under the directory passed to
 * `medopenclaw bench prepare --module bracs --source ...`.
 *
 * Uses only QuPath's own API (QP.exportAllObjectsToGeoJson): the classification of every annotation is kept,
 * which is what the loader maps onto the seven BRACS labels.
 */
def folder = buildFilePath(PROJECT_BASE_DIR, 'geojson')
mkdirs(folder)
def name = GeneralTools.stripExtension(getProjectEntry().getImageName())
exportAllObjectsToGeoJson(buildFilePath(folder, name + '.geojson'), 'FEATURE_COLLECTION', 'EXCLUDE_MEASUREMENTS')
println "exported ${name}.geojson"
