// The default theme, plus the course's own components (registered globally for the Markdown pages).
import { defineAsyncComponent } from 'vue'
import DefaultTheme from 'vitepress/theme'
import CoursePath from './CoursePath.vue'
import GpuAtlas from './components/GpuAtlas.vue'

export default {
  extends: DefaultTheme,
  enhanceApp({ app }) {
    app.component('CoursePath', CoursePath)
    app.component('GpuAtlas', GpuAtlas)
    // The interactive pictures (docs/course/interactive.md), loaded only by the pages that show them
    // (the roofline carries every ladder record's points); their arithmetic is in lib/, tested by
    // `npm run test:site`.
    app.component('CoalescingDemo', defineAsyncComponent(() => import('./components/CoalescingDemo.vue')))
    app.component('ReductionTree', defineAsyncComponent(() => import('./components/ReductionTree.vue')))
    app.component('RooflineExplorer', defineAsyncComponent(() => import('./components/RooflineExplorer.vue')))
    app.component('OnlineSoftmax', defineAsyncComponent(() => import('./components/OnlineSoftmax.vue')))
  },
}
